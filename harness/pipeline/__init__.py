"""From a model name to its exported program (and the stages targets cache on it): below the
targets, which build on it, and above the results layer."""
