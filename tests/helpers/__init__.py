"""What the tests share: plug-in strategies and models, a stand-in executor_runner, a headless
browser, an exhaustive search to check solvers against, and a recorder of sweep events."""
