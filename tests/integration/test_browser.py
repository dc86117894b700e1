"""The judging page in a real browser: Debian's Chromium, headless, driven by Selenium.

A real ``sift worker`` and a real ``sift web`` run on the session broker. The test
opens the dashboard and the judging page, clicks Relevant on a delivered
document, then checks that the judgment reached the judgments topic and that the
profile's stats on the dashboard changed (judged count, and the model version
once the worker has learned from the judgment). Screenshots go to the test's
``tmp_path`` (and to ``$SIFT_WEB_SCREENSHOTS`` when set, for the docs).

No browser or driver is downloaded: ``/usr/bin/chromium`` and ``/usr/bin/chromedriver``
(Debian's ``chromium`` and ``chromium-driver``) or ``$SIFT_CHROMIUM`` and
``$SIFT_CHROMEDRIVER``. Without them (or without selenium, a test dependency) the test
fails, in CI or not; to run the other integration tests without a browser, deselect it
with ``-m "not browser"``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import orjson
import pytest

from sift.agents.harness import WebProcess, WorkerProcess, read_all, send_all, total, wait_for
from sift.devbroker import free_port
from sift.settings import Settings
from sift.topics.codecs import read_jsonl
from sift.topics.records import Document

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
REUTERS = ROOT / "data" / "reuters21578"
TOKEN = "browser-test-token"
PROFILE = "earn"
CHROMIUM = os.environ.get("SIFT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SIFT_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,900")


def missing(reason: str) -> NoReturn:
    """Fail: the browser the test needs is missing (deselect with ``-m "not browser"``)."""
    pytest.fail(f"browser unavailable: {reason} (deselect with -m 'not browser')", pytrace=False)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver (explicit paths: no Selenium Manager)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service as ChromeService
    except ImportError:
        missing("the selenium package is not installed")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            missing(f"{path} not found (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    profile_dir = tmp_path / "chromium-profile"
    options.add_argument(f"--user-data-dir={profile_dir}")
    service = ChromeService(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "driver.log"))
    try:
        drv = webdriver.Chrome(service=service, options=options)
    except Exception as exc:  # the browser itself cannot start
        missing(f"chromium did not start: {str(exc).splitlines()[0]}")
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


def small_corpus(tmp_path: Path) -> tuple[Path, list[str], list[Document]]:
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))[:600]
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))[:120]
    path = tmp_path / "train.jsonl.gz"
    with gzip.open(path, "wb") as fh:
        for d in train:
            fh.write(orjson.dumps(d.to_obj()) + b"\n")
    positives = [d.id for d in train if PROFILE in d.topics][:3]
    return path, positives, test


def cell(driver: Any, field: str) -> str:
    from selenium.webdriver.common.by import By

    sel = f'tr[data-profile="{PROFILE}"] td[data-field="{field}"]'
    return str(driver.find_element(By.CSS_SELECTOR, sel).text)


def save(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    assert driver.save_screenshot(str(path)), f"no screenshot {path}"
    docs_dir = os.environ.get("SIFT_WEB_SCREENSHOTS")
    if docs_dir:
        Path(docs_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(docs_dir) / name)
    return path


def pending(web: WebProcess, profile: str) -> list[dict[str, Any]]:
    """The judging page's queue of ``profile``; empty while ``sift web`` has not yet read
    the profile's spec (404) or the worker's first status of a review: the web reads the
    profiles topic on its own, and a spec sent after it caught up reaches it a moment
    later than it reaches the worker the test waited for."""
    import urllib.error

    try:
        items: list[dict[str, Any]] = web.get(f"/api/pending?profile={profile}")["items"]
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 503):
            return []
        raise
    return items


def test_judge_in_the_browser_reaches_kafka_and_the_dashboard(
        driver: Any, broker_url: str, topic_prefix: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    corpus, positives, test_docs = small_corpus(tmp_path)
    settings = Settings(broker=broker_url, topic_prefix=topic_prefix,
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=2,
                        data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus),
                        web_port=free_port(), api_token=TOKEN)
    worker = WorkerProcess(settings, "w1", log_dir=tmp_path).start()
    web = WebProcess(settings, tmp_path / "web.log")
    try:
        worker.wait_ready(120)
        web.start()
        wait_for(web.ready, 60, "sift web answering")
        spec = {"profile": PROFILE, "query": "earnings profit net shr dividend",
                "positives": positives}
        send_all(settings, settings.topic("profiles"), [(PROFILE.encode(), orjson.dumps(spec))])
        wait_for(lambda: total([worker], "profiles_created") == 1, 60, "profile created")
        plain = [Document(d.id, d.text, d.title, d.date).to_obj() for d in test_docs]
        send_all(settings, settings.topic("documents"),
                 [(None, orjson.dumps({"documents": plain[i:i + 40]}))
                  for i in range(0, len(plain), 40)])
        wait_for(lambda: pending(web, PROFILE), 90, "a delivered document on the judging page")
        wait_for(lambda: web.get(f"/api/profiles/{PROFILE}").get("model_version") is not None,
                 30, "the profile's state")
        review = {"review": "appenzeller", "screened": 1200, "found": 38, "r_hat": 40.3,
                  "recall": 0.943, "target_recall": 0.95, "stop": False}
        send_all(settings, settings.topic("review-status"), [(b"appenzeller",
                                                              orjson.dumps(review))])
        wait = WebDriverWait(driver, 30)

        # the dashboard, with the token in the fragment (kept in sessionStorage, never sent)
        driver.get(f"{web.url}/#token={TOKEN}")
        wait.until(lambda d: cell(d, "judged") == "0")
        version_before = cell(driver, "model_version")
        delivered = int(cell(driver, "delivered"))
        assert delivered >= 1
        assert "token=" not in driver.current_url

        # the judging page: click Relevant on the first delivered document
        driver.find_element(By.LINK_TEXT, PROFILE).click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#queue li.item")))
        first = driver.find_element(By.CSS_SELECTOR, "#queue li.item")
        doc_id = first.get_attribute("data-doc-id")
        title = first.find_element(By.CSS_SELECTOR, "h3").text
        assert title
        save(driver, tmp_path, "judge.png")
        first.find_element(By.CSS_SELECTOR, "button.rel").click()
        wait.until(ec.staleness_of(first))
        assert driver.find_element(By.ID, "status").text == f"Relevant: {doc_id}"
        items = driver.find_elements(By.CSS_SELECTOR, "#queue li.item")
        assert doc_id not in [li.get_attribute("data-doc-id") for li in items]

        # the judgment is on the judgments topic, keyed by profile
        def judged_on_topic() -> list[dict[str, Any]]:
            rows = read_all(settings, settings.topic("judgments"), idle=1.0)
            return [orjson.loads(v) for k, v, _, _ in rows if k == PROFILE.encode()]

        (judgment,) = wait_for(judged_on_topic, 30, "the judgment on the topic")
        assert judgment["doc_id"] == doc_id and judgment["relevant"] is True
        assert judgment["profile"] == PROFILE and judgment["judge"] == "web"

        # the dashboard shows it: judged 1, precision 1, and the worker's new model version
        driver.find_element(By.LINK_TEXT, "Dashboard").click()
        wait.until(lambda d: cell(d, "judged") == "1")
        assert cell(driver, "precision") == "1.000"
        WebDriverWait(driver, 60).until(lambda d: cell(d, "model_version") != version_before)
        wait_for(lambda: total([worker], "judgments") == 1, 30, "the worker learned it")
        # the review's estimates and the workers' consumer lag are shown too
        row = 'tr[data-review="appenzeller"] td'
        wait.until(lambda d: [td.text for td in d.find_elements(By.CSS_SELECTOR, row)] ==
                   ["appenzeller", "1200", "38", "40.3", "0.943", "0", "continue"])
        wait.until(lambda d: d.find_element(By.ID, "lag-total").text.isdigit())
        save(driver, tmp_path, "dashboard.png")

        # keyboard: j selects the next document, n judges it not relevant
        driver.find_element(By.LINK_TEXT, PROFILE).click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#queue li.selected")))
        items = driver.find_elements(By.CSS_SELECTOR, "#queue li.item")
        second = items[1]
        second_id = second.get_attribute("data-doc-id")
        body = driver.find_element(By.TAG_NAME, "body")
        body.send_keys("j")
        wait.until(lambda d: "selected" in (second.get_attribute("class") or ""))
        body.send_keys("n")
        wait.until(ec.staleness_of(second))
        (by_key,) = wait_for(lambda: [j for j in judged_on_topic() if not j["relevant"]], 30,
                             "the keyboard judgment on the topic")
        assert by_key["doc_id"] == second_id != doc_id
        # u changes that verdict (a correction): published with the other label, the worker
        # relabels the document instead of learning it twice
        change = driver.find_element(By.ID, "change")
        wait.until(lambda d: change.is_displayed()
                   and change.text == f"Change {second_id} to relevant")
        body.send_keys("u")
        wait.until(lambda d: d.find_element(By.ID, "status").text
                   == f"Changed to relevant: {second_id}")
        assert change.text == f"Change {second_id} to not relevant"
        wait_for(lambda: [j for j in judged_on_topic() if j["doc_id"] == second_id
                          and j["relevant"]], 30, "the correction on the topic")
        wait_for(lambda: total([worker], "judgments_corrected") == 1, 30,
                 "the worker's correction")
        assert total([worker], "judgments") == 2

        # a review in the stream: its requests are judged on its page like deliveries
        name = "grain review"
        rspec = {"profile": name, "mode": "review", "query": "grain wheat corn harvest",
                 "params": {"n_top": 3, "draws": 2, "n_negatives": 20, "random_state": 0}}
        send_all(settings, settings.topic("profiles"), [(name.encode(), orjson.dumps(rspec))])
        wait_for(lambda: any(r["review"] == name for r in web.get("/api/stats")["reviews"]), 60,
                 "the review's first status")
        tagged = [{**d, "metadata": {"review": name}} for d in plain[:60]]
        send_all(settings, settings.topic("documents"), [(None, orjson.dumps({"documents": tagged}))])
        quoted = urllib.parse.quote(name, safe="")
        asked = wait_for(lambda: pending(web, quoted), 90,
                         "the review's requests on its judging page")
        assert all(it["review"] and it["batch"] == 1 for it in asked)
        driver.find_element(By.LINK_TEXT, "Dashboard").click()
        wait.until(lambda d: d.find_elements(By.LINK_TEXT, name))
        driver.find_element(By.LINK_TEXT, name).click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#queue li.item")))
        request = driver.find_element(By.CSS_SELECTOR, "#queue li.item")
        asked_id = request.get_attribute("data-doc-id")
        assert asked_id == asked[0]["doc_id"]
        assert "batch 1 · rank 1" in request.find_element(By.CSS_SELECTOR, "p.meta").text
        save(driver, tmp_path, "review.png")
        request.find_element(By.CSS_SELECTOR, "button.rel").click()
        wait.until(ec.staleness_of(request))

        def review_judged() -> list[dict[str, Any]]:
            rows = read_all(settings, settings.topic("judgments"), idle=1.0)
            return [orjson.loads(v) for k, v, _, _ in rows if k == name.encode()]

        (answer,) = wait_for(review_judged, 30, "the review's judgment on the topic")
        assert (answer["doc_id"], answer["profile"], answer["relevant"]) == (asked_id, name, True)
        wait_for(lambda: next(r for r in web.get("/api/stats")["reviews"]
                              if r["review"] == name)["screened"] == 1, 60,
                 "the worker's review status counting the judgment")
        assert (tmp_path / "judge.png").stat().st_size > 10_000
        assert (tmp_path / "dashboard.png").stat().st_size > 10_000
    finally:
        web.stop()
        worker.stop()
