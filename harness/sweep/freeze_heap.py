"""Imported last by the workers' fork server (:data:`harness.sweep.fork_server.PRELOAD`),
and nowhere else: everything the server imported (torch, ExecuTorch, the harness) is never
garbage, so it leaves the garbage collector's way. Every worker forked from the server
inherits that (a collection no longer traverses it: a prefix loads ~1.7x faster), and the
server itself ends in a moment when the sweep does, instead of spending about a second and
a half of the interpreter's exit on a last collection while it still holds the command's
stdout and stderr open (a pipe reading them waits until it lets go).
"""

import gc

gc.freeze()
