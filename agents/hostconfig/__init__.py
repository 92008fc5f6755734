"""Host config files: their formats (``formats``) and what Engram writes into each (``hosts``).
Used by ``engram.agents.connect``; imports nothing heavy at package import."""
