"""Host adapters: one module per host, each following ``engram.agents.contract``."""
