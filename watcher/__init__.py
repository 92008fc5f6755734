"""Native memory file sync, the transcript watcher and JSONL importers.

Not built yet (see the issue tracker).
"""
