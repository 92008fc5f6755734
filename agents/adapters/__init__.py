"""Host modules: one per host (its hook adapter and its connect record), each following
``engram.agents.contract``; listed by name in ``engram.agents.registry``."""
