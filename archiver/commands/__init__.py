"""The verbs of the ``archiver`` command, one module each (``archiver.cli`` dispatches to them).

Each module has ``add(verbs)``, which adds its verb (with its one-line description, its arguments
and its exit codes) to the parser, and a ``run(args) -> int`` per verb it adds; output formatting
lives in small functions beside it. What every verb shares is in ``common``.
"""
