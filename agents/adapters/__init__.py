"""Host adapters: one module per host, each following ``agents.contract``."""
