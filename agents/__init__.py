"""Host adapters, the hook CLI and its spool, `connect`, and the MCP server.

Not built yet: capture from agent hosts arrives through ``POST /v1/observe`` directly until the
adapters land (see the issue tracker).
"""
