"""The viewer in a real browser: Debian's Chromium, headless, driven by Playwright, against a
real `engram serve`. Each step is what a person does; screenshots of every page go to
``.screenshots/`` (git-ignored, or ENGRAM_SCREENSHOTS) for a person to look at."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram import inbox
from engram.events import validate_event
from engram.store import Store, now
from tests.support import REPO, Cluster, observe_body, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ.get("ENGRAM_SCREENSHOTS") or REPO / ".screenshots")
PROJECT = "shop"

sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("Debian's chromium is missing; infra/dev/install.sh dev installs it")
    pytest.skip(
        "Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True
    )


def _dead_letter(cluster: Cluster) -> str:
    """A real dead letter, as processing that failed on every attempt leaves it."""
    store = Store.open(f"sqlite:///{cluster.tmp / 'data' / 'engram.db'}")
    try:
        body = observe_body(PROJECT, "s-dead", 1, toolInput={"command": "make deadletter"})
        event = validate_event(body, max_field_chars=100_000, received_at=now())
        inbox.accept(store, event, 100)
        inbox.fail(store, event.event_id, "OperationalError: disk I/O error", 1, 1, 1.0, 1.0)
    finally:
        store.close()
    return event.event_id


def _seed(cluster: Cluster) -> None:
    post = cluster.request
    assert post("POST", "/v1/sessions", {"sessionId": "s-login", "project": PROJECT})[0] == 201
    steps = [
        {"hookType": "UserPromptSubmit", "prompt": "The login test fails with a KeyError"},
        {
            "toolName": "Bash",
            "toolInput": {"command": "pytest tests/test_login.py"},
            "toolOutput": {"stdout": "FAILED test_login_ok - KeyError: 'user_id'", "exit_code": 1},
        },
        {
            "toolName": "Edit",
            "toolInput": {
                "file_path": "src/auth/session.py",
                "old_string": "data['user_id']",
                "new_string": "data.get('user_id')",
            },
        },
        {
            "toolName": "Bash",
            "toolInput": {"command": "pytest tests/test_login.py"},
            "toolOutput": {"stdout": "1 passed", "exit_code": 0},
        },
    ]
    for n, step in enumerate(steps, 1):
        body = {**observe_body(PROJECT, "s-login", n), **step}
        if step.get("hookType") == "UserPromptSubmit":
            body.pop("toolName"), body.pop("toolInput"), body.pop("toolOutput")
        assert post("POST", "/v1/observe", body)[0] == 201, body
    wait_for(
        lambda: (
            len(post("GET", f"/v1/sessions/s-login/observations?project={PROJECT}")[1]["items"])
            == 4
        ),
        message="the session stored",
    )
    post("POST", "/v1/sessions/s-login/end", {})
    for content in (
        "Anonymous sessions have no user_id: use data.get('user_id')",
        "Release with make release, never by hand",
        "The staging database is reset every Monday",
    ):
        assert post("POST", "/v1/memories", {"project": PROJECT, "content": content})[0] == 201


class Viewer:
    def __init__(self, cluster: Cluster, page: Any) -> None:
        self.cluster, self.page = cluster, page
        self.base = cluster.url + "/"
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def go(self, hash_: str) -> None:
        self.page.goto(self.base + hash_)

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Viewer]:
    cluster = Cluster(tmp_path_factory.mktemp("viewer"))
    Store.open(f"sqlite:///{cluster.tmp / 'data' / 'engram.db'}").close()  # migrated, empty
    cluster.dead_event = _dead_letter(cluster)  # type: ignore[attr-defined]
    cluster.serve()
    _seed(cluster)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(10_000)
        page.goto(_link(cluster))  # signed in, so each test stands alone
        page.get_by_role("heading", name="Overview").wait_for()
        try:
            yield Viewer(cluster, page)
        finally:
            browser.close()
            cluster.stop_all()


def _link(cluster: Cluster) -> str:
    status, body = cluster.request("POST", "/v1/viewer/links")
    assert status == 201
    return cluster.url + "/" + body["path"]


def test_the_one_time_link_signs_in_and_the_secret_never_reaches_the_page(viewer: Viewer) -> None:
    fresh = viewer.page.context.browser.new_context(viewport={"width": 1280, "height": 900})
    page = fresh.new_page()  # no cookie yet: the sign-in page, then the link
    page.on("console", lambda m: m.type == "error" and viewer.errors.append(m.text))
    page.on("pageerror", lambda e: viewer.errors.append(str(e)))
    page.goto(viewer.base)
    assert "engram open" in page.locator("main.signin").inner_text()
    page.goto(_link(viewer.cluster))
    assert page.url == viewer.base  # the token left the address bar
    page.get_by_role("heading", name="Overview").wait_for()
    page.locator("#live.ok").wait_for()
    assert page.evaluate("document.cookie") == ""  # HttpOnly: scripts cannot read it
    html = page.content()
    storage = page.evaluate("JSON.stringify(Object.assign({}, localStorage, sessionStorage))")
    assert viewer.cluster.secret not in html and viewer.cluster.secret not in storage
    assert page.locator("[data-key=observations]").inner_text() == "4"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "overview.png"), full_page=True)
    fresh.close()
    assert not viewer.errors, viewer.errors  # a CSP violation would be logged here


def test_search_shows_each_stream_s_rank_and_a_hit_opens_its_source(viewer: Viewer) -> None:
    page = viewer.page
    viewer.go("#/search")
    page.get_by_label("Search query").fill("login KeyError user_id")
    page.get_by_role("button", name="Search").click()
    results = page.get_by_role("list", name="Results")
    results.locator("li").first.wait_for()
    assert re.search(r"bm25 #\d", results.inner_text())
    viewer.shot("search")
    # the first observation among the hits (which one leads is the ranking's business)
    hit = results.locator("li", has=page.get_by_text("observation", exact=True)).first
    title = hit.locator("a.title").inner_text()
    assert "KeyError" in title or "user_id" in hit.inner_text()
    hit.locator("a.title").click()
    page.get_by_role("link", name="← This step in its session").wait_for()
    assert "/observations/obs_" in page.url
    assert title in page.locator("main").inner_text()


def test_the_time_filter_narrows_the_search_on_the_server(viewer: Viewer) -> None:
    page = viewer.page
    stamp = "%Y-%m-%dT%H:%M"
    for since, expect in (
        (time.strftime(stamp, time.localtime(time.time() + 86_400)), "0 hit(s)"),
        (time.strftime(stamp, time.localtime(time.time() - 86_400)), "hit(s)"),
    ):
        viewer.go("#/search")
        page.get_by_label("Search query").fill("login KeyError user_id")
        page.get_by_label("From").fill(since)
        with page.expect_request("**/v1/search") as sent:
            page.get_by_role("button", name="Search").click()
        assert "since" in (sent.value.post_data_json or {})  # sent to the server, not filtered here
        summary = page.get_by_text(re.compile(r"\d+ hit\(s\)"))
        summary.wait_for()
        assert expect in summary.inner_text()
        items = page.get_by_role("list", name="Results").locator("li").count()
        assert (items == 0) == (expect == "0 hit(s)"), (since, items)


def test_an_observation_appears_within_a_second_without_a_reload(viewer: Viewer) -> None:
    page = viewer.page
    viewer.go("#/overview")
    page.locator("#live.ok").wait_for()
    page.evaluate("window.__sameDocument = 42")
    body = observe_body(PROJECT, "s-live", 1, toolInput={"command": "make live-marker"})
    sent = time.monotonic()
    assert viewer.cluster.request("POST", "/v1/observe", body)[0] == 201
    page.get_by_role("list", name="Recent activity").get_by_text("make live-marker").wait_for(
        timeout=1000
    )
    seen = time.monotonic() - sent
    assert page.evaluate("window.__sameDocument") == 42  # updated in place, not reloaded
    print(f"observation on screen {seen * 1000:.0f} ms after its POST returned")


def test_a_session_replays_step_by_step_and_links_to_any_event(viewer: Viewer) -> None:
    page = viewer.page
    viewer.go("#/sessions")
    page.get_by_role("link", name=re.compile("login test fails")).click()
    slider = page.get_by_label("Replay position")
    slider.wait_for()
    assert page.get_by_text("step 4 of 4").is_visible()
    page.get_by_role("button", name="◀ Step back").click()
    page.get_by_role("button", name="◀ Step back").click()
    page.get_by_text("step 2 of 4").wait_for()
    timeline = page.get_by_role("list", name="Timeline")
    assert "pytest tests/test_login.py" in timeline.locator("li.current").inner_text()
    assert timeline.locator("li.future").count() == 2
    page.keyboard.press("ArrowRight")
    page.get_by_text("step 3 of 4").wait_for()
    viewer.shot("session")
    link = timeline.locator("li.current a", has_text="link")
    link.click()
    page.get_by_role("link", name="← This step in its session").click()
    page.get_by_text("step 3 of 4").wait_for()  # the deep link opens at that step


def test_a_memory_is_edited_as_a_new_version_and_forgotten_with_a_reason(viewer: Viewer) -> None:
    page = viewer.page
    viewer.go("#/memories")
    page.get_by_role("link", name=re.compile("make release")).click()
    editor = page.get_by_label("Memory content")
    editor.fill("Release with make release from a clean main, never by hand")
    page.get_by_role("button", name="Save as a new version").click()
    page.get_by_text("version 2", exact=False).wait_for()
    versions = page.get_by_role("list", name="Versions")
    assert "clean main" in " ".join(versions.locator("ins").all_inner_texts())
    assert "null" not in page.locator("main").inner_text()
    viewer.shot("memory")
    memory_id = page.url.rsplit("/", 1)[1]
    page.get_by_role("button", name="Forget…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label(re.compile("Reason")).fill("superseded by the release doc")
    dialog.get_by_role("button", name="Forget").click()
    page.get_by_role("heading", name="Memories").wait_for()
    assert "make release" not in page.locator("main").inner_text()
    trail = viewer.cluster.request("GET", f"/v1/audit?targetId={memory_id}")[1]["items"]
    forget = [e for e in trail if e["action"] == "memory.forget"][0]
    assert forget["actor"] == "viewer"
    assert forget["details"]["reason"] == "superseded by the release doc"


def test_bulk_forget_asks_first(viewer: Viewer) -> None:
    page = viewer.page
    viewer.go("#/memories")
    page.get_by_label("Select all").check()
    page.get_by_role("button", name=re.compile(r"Forget selected \(2\)")).click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Cancel").click()
    assert page.get_by_role("list", name="Memories").locator("li").count() == 2
    page.get_by_role("button", name=re.compile(r"Forget selected \(2\)")).click()
    dialog.get_by_label(re.compile("Reason")).fill("cleaning up")
    dialog.get_by_role("button", name="Forget").click()
    page.get_by_text("No memories here.").wait_for()


def test_a_dead_letter_is_retried_from_the_overview(viewer: Viewer) -> None:
    page = viewer.page
    viewer.go("#/overview")
    dead = viewer.cluster.dead_event  # type: ignore[attr-defined]
    row = page.locator(f'li[data-event="{dead}"]')
    row.wait_for()
    assert "disk I/O error" in row.inner_text()
    row.get_by_role("button", name="Retry").click()
    page.get_by_text("No dead letters.").wait_for()
    page.get_by_role("list", name="Recent activity").get_by_text("make deadletter").wait_for()


def test_the_stream_resumes_after_the_server_restarts(viewer: Viewer) -> None:
    page, cluster = viewer.page, viewer.cluster
    viewer.go("#/overview")
    page.locator("#live.ok").wait_for()
    cluster.procs[-1].stop()
    page.locator("#live.stale").wait_for()
    assert "offline" in page.locator("#live").inner_text()
    viewer.shot("overview-offline")
    cluster.serve()
    # posted before the page is back: it arrives through the resume (lastEventId), not live
    body = observe_body(PROJECT, "s-after", 1, toolInput={"command": "make after-restart"})
    assert cluster.request("POST", "/v1/observe", body)[0] == 201
    page.locator("#live.ok").wait_for(timeout=20_000)
    # stored by the restarted server's worker, then streamed: past 10 s once under the full suite
    activity = page.get_by_role("list", name="Recent activity")
    activity.get_by_text("make after-restart").wait_for(timeout=20_000)


def test_every_page_reads_at_phone_width_in_dark_and_by_keyboard(viewer: Viewer) -> None:
    page = viewer.page
    pages = {
        "overview": "#/overview",
        "search": "#/search?q=login",
        "sessions": "#/sessions",
        "session": "#/sessions/s-login",
        "memories": "#/memories",
        "graph": "#/graph?entity=src/auth/session.py",
        "context": f"#/context?project={PROJECT}&budget=500",
    }
    for name, hash_ in pages.items():
        viewer.go(hash_)
        page.locator(".view > *").first.wait_for()
        page.wait_for_timeout(300)
        viewer.shot(f"{name}-1280")
        if name == "graph":
            assert page.locator("svg.graph g.node").count() > 1  # the file and its neighbours
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 390, "height": 844})
    for name, hash_ in pages.items():
        viewer.go(hash_)
        page.locator(".view > *").first.wait_for()
        page.wait_for_timeout(300)
        wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 1, f"{name} scrolls sideways by {wide}px at 390px"
        # a row's title keeps most of the row: its neighbours wrap below it, it is never
        # squeezed into a column a few letters wide
        narrow = page.evaluate(
            """[...document.querySelectorAll('.list > li .title')]
                 .map((t) => [t.textContent, t.getBoundingClientRect().width,
                              t.closest('li').getBoundingClientRect().width])
                 .filter(([, title, row]) => title < row * 0.5)"""
        )
        assert not narrow, f"{name}: titles squeezed at 390px: {narrow}"
        viewer.shot(f"{name}-phone-dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 23, 28)"
    page.set_viewport_size({"width": 1280, "height": 900})
    viewer.go("#/overview")
    page.locator(".view > *").first.wait_for()
    page.locator(".skip").focus()  # the first stop of the page's tab order
    for _ in range(6):  # the skip link, then the navigation, by keyboard alone
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Search":
            break
    assert page.evaluate("document.activeElement.textContent") == "Search"
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Search").wait_for()
