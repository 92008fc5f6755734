"""The `engram` command and the process wiring behind it: the composition root.

``entry`` is the executable (the hook goes straight to ``engram.agents.hook``); ``main`` parses
the command line; ``server`` builds the gateway's services once (store, vectors, queue, Flask
app, MCP mount, embedded worker) and hands them to the doors; ``demo`` seeds example sessions.
Nothing in the core (``engram/``) or in a door imports this package.
"""
