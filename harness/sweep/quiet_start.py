"""Imported first by the workers' fork server of a quiet command
(:func:`harness.sweep.fork_server.context`), and nowhere else: the libraries' chatter is off
before the server imports them (torch and torchao warn and log as they load), so the server
and every worker forked from it are as quiet as the command that started them.
"""

from harness import quiet

quiet.apply(verbose=False)
