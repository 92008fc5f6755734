"""The embedded server's derived lanes: vectors and graph catch up in the background, never
ahead of capture.

In the embedded default one process accepts, stores and indexes. Capture runs on the Celery
worker's threads; graph extraction and embedding run here, each on a thread of its own, in short
steps (graph batches for half a second, one embedding batch), and only while the capture inbox
has nothing waiting to be stored. Under a burst the derived indexes fall behind, visibly (``/v1/status``:
``derived``), and catch up when the burst is over; capture never waits for them.

A lane that yielded for ``MAX_YIELD_SECONDS`` takes one step anyway, so a capture stream that
never pauses still leaves the derived indexes moving, at a bounded share.

Both lanes also wait while a bulk import runs (``Store.bulk_running``), taking one step at
least every ``BULK_MAX_YIELD_SECONDS``, and catch up after it. Measured on 2 cores, 30,000-item
imports with a hook posting at 5/s (docs/benchmarks.md): with the lanes working beside the
import it ran at ~300 items/s and the hook's accept p95/p99 was ~38/59 ms; with both waiting,
~600 items/s and ~30/45 ms. Nothing live loses by it: the derive queue is served oldest first,
so a capture made during an import waited behind the import's rows anyway, and observations
past the vector cap were embedded only to be pruned.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from engram import drains
from engram.store import Store
from engram.vectors import Vectors

log = logging.getLogger("engram.lane")

IDLE_POLL_SECONDS = 5.0
"""How long the lane sleeps with nothing to do before looking again without being kicked."""
YIELD_SECONDS = 0.05
"""Pause while capture has work waiting."""
MAX_YIELD_SECONDS = 2.0
BULK_MAX_YIELD_SECONDS = 30.0
"""The longest a lane that yields to bulk work waits before one step anyway: an endless series
of imports still leaves its index moving."""
GRAPH_SLICE_SECONDS = 0.5
"""Graph work per step before the embedding batch: ~100 realistic documents at ~4 ms each."""


GRAPH, VECTOR, LLM = "graph", "vector", "llm"


class DerivedLane:
    """One background thread draining derived queues (``work``: graph, vector or both) in small
    steps."""

    def __init__(
        self,
        store: Store,
        vectors: Vectors,
        *,
        capture_busy: Callable[[], bool],
        vector_batch: int,
        bulk_busy: Callable[[], bool] | None = None,
        graph_batch: int = drains.GRAPH_BATCH,
        keep_observations: int = 0,
        work: tuple[str, ...] = (GRAPH, VECTOR),
        llm_drain: Callable[[], int] | None = None,
    ) -> None:
        self.work = work
        self.llm_drain = llm_drain
        self.store = store
        self.vectors = vectors
        self.capture_busy = capture_busy
        self.bulk_busy = bulk_busy
        self.vector_batch = vector_batch
        self.graph_batch = graph_batch
        self.keep_observations = keep_observations
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.steps = 0
        self.yields = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name=f"engram-derived-{'-'.join(self.work)}"
            )
            self._thread.start()

    def kick(self) -> None:
        """Ask for a drain soon (a write queued derived work); cheap to call often."""
        self._wake.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def request_stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def stop(self, timeout: float) -> None:
        """Stop after the step in progress (at most one embedding batch)."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(IDLE_POLL_SECONDS)
            self._wake.clear()
            yielded_since: float | None = None
            while not self._stopping.is_set():
                longest = self._longest_yield()
                if longest:
                    yielded_since = yielded_since or time.monotonic()
                    if time.monotonic() - yielded_since < longest:
                        self.yields += 1
                        self._stopping.wait(YIELD_SECONDS)
                        continue
                yielded_since = None
                try:
                    more = self.step()
                except Exception:  # noqa: BLE001 - the lane must outlive one bad step; logged
                    log.exception("derived lane step failed; retrying after a pause")
                    self._stopping.wait(IDLE_POLL_SECONDS)
                    more = False
                if not more:
                    break

    def _longest_yield(self) -> float:
        """How long this lane may wait now, or 0 when nothing asks it to: capture has work
        waiting, or (``bulk_busy``) a bulk import runs."""
        if self.capture_busy():
            return MAX_YIELD_SECONDS
        if self.bulk_busy is not None and self.bulk_busy():
            return BULK_MAX_YIELD_SECONDS
        return 0.0

    def step(self) -> bool:
        """Graph batches for up to ``GRAPH_SLICE_SECONDS``, then one embedding batch (each when
        this lane does it); True when work may be left. Graph batches are short (the store's
        write lock) and an embedding batch is long (seconds of CPU), so each gets a comparable
        share of a step."""
        self.steps += 1
        more_graph = more_vectors = False
        started = time.monotonic()
        while GRAPH in self.work:
            applied = drains.drain_graph(self.store, batch=self.graph_batch, max_batches=1)
            more_graph = applied >= self.graph_batch
            # not cut short by capture: a graph batch holds the write lock for tens of ms,
            # and the store's fair lock lets a waiting capture in between two batches
            if (
                not more_graph
                or time.monotonic() - started >= GRAPH_SLICE_SECONDS
                or self._stopping.is_set()
            ):
                break
        if VECTOR in self.work:
            result = drains.drain_vectors(
                self.store,
                self.vectors,
                self.vector_batch,
                batches=1,
                keep_observations=self.keep_observations,
            )
            # a failed embedding batch waits for its lease; the idle poll or a kick comes back
            more_vectors = result.more and not result.failed
        more_llm = LLM in self.work and self.llm_drain is not None and self.llm_drain() > 0
        return more_graph or more_vectors or more_llm


class DerivedLanes:
    """The embedded server's derived lanes: one thread for the graph and one for vectors, so
    an embedding batch (CPU outside the GIL) and graph batches (the store) run side by side;
    with an LLM provider set, a third for LLM work (one item a step: a call waits seconds on
    the network and must not hold up the others)."""

    def __init__(self, lanes: list[DerivedLane]) -> None:
        self.lanes = lanes

    def start(self) -> None:
        for lane in self.lanes:
            lane.start()

    def kick(self) -> None:
        for lane in self.lanes:
            lane.kick()

    @property
    def alive(self) -> bool:
        return all(lane.alive for lane in self.lanes)

    def stop(self, timeout: float) -> None:
        """Stop them all within ``timeout`` together."""
        for lane in self.lanes:
            lane.request_stop()
        deadline = time.monotonic() + timeout
        for lane in self.lanes:
            lane.stop(max(deadline - time.monotonic(), 0.0))
