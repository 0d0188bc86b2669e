"""Notification delivery: 1,000 events fanned out to three channels, and the pages meanwhile.

A portal app (PostgreSQL, delivery worker on, as in production) with an e-mail server
(aiosmtpd in its own process, STARTTLS with a private CA), a team's Slack-compatible
webhook and the org's signed JSON webhook (HTTP receivers in their own process). Each of
``--events`` events notifies one person by e-mail and posts to both webhooks: 3 deliveries
per event. Events are committed as fast as one thread can; the worker is woken by each
commit. Prints delivery throughput, the latency from an event's commit to its arrival at
each receiver (p50, p95), and the team page's latency before and while delivering
(median of ``--rounds`` runs of ``--requests`` requests each).

    .venv/bin/python bench/notify_delivery.py --events 1000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import func, select, text  # noqa: E402

from app.cli import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import unit_of_work  # noqa: E402
from app.core.models import Delivery, User  # noqa: E402
from app.main import create_app  # noqa: E402
from app.notifications import service as notifications  # noqa: E402
from app.runtime import portal_of  # noqa: E402
from app.teams.seed import seed_example  # noqa: E402
from tests.receivers import WebhookReceiver, self_signed, smtp_server  # noqa: E402
from tests.servers import postgres_server  # noqa: E402
from tests.web.conftest import client_for  # noqa: E402


def receivers(ports: multiprocessing.Queue[int], out: str, stop: EventType) -> None:
    """Two HTTP receivers in this process; at the end, every post's arrival time."""
    slack, signed = WebhookReceiver(), WebhookReceiver()
    arrivals: dict[str, list[tuple[str, float]]] = {"slack": [], "json": []}

    def wrap(receiver: WebhookReceiver, name: str) -> None:
        posts = receiver.posts

        class Recorder(list):  # type: ignore[type-arg]
            def append(self, item: object) -> None:
                arrivals[name].append((item.headers["X-Portal-Delivery"], time.time()))  # type: ignore[attr-defined]
                super().append(item)

        receiver.posts = Recorder(posts)

    wrap(slack, "slack")
    wrap(signed, "json")
    ports.put(slack.port)
    ports.put(signed.port)
    stop.wait()
    Path(out).write_text(json.dumps(arrivals))
    slack.close()
    signed.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def page_latency(client: TestClient, requests: int) -> float:
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get("/teams/1")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for separate, burst in ((False, False), (False, True), (True, True)):
        scenario(args, separate=separate, burst=burst)


def scenario(args: argparse.Namespace, *, separate: bool, burst: bool) -> None:
    """``separate``: the portal process only writes; `gpu-portal deliver` sends, in its
    own process (polling every 0.5 s) — the deployment for busy portals. ``burst``: every
    event in one transaction (the delivery alone is measured, not the writing); else one
    transaction per event, as fast as one thread commits them."""
    folder = Path(tempfile.mkdtemp(prefix="bench-notify-"))
    cert, key = self_signed(folder)
    ctx = multiprocessing.get_context("spawn")
    ports: multiprocessing.Queue[int] = ctx.Queue()
    stop = ctx.Event()
    out = str(folder / "arrivals.json")
    receiver = ctx.Process(target=receivers, args=(ports, out, stop))
    receiver.start()
    slack_port, json_port = ports.get(timeout=30), ports.get(timeout=30)

    with postgres_server() as url, smtp_server(folder, tls=(cert, key)) as smtp:
        values: dict[str, object] = {
            "development": True,
            "database_url": url,
            "worker_enabled": False,
            "usage_collector_enabled": False,
            "public_url": "https://gpu.example.org",
            "smtp_host": "127.0.0.1",
            "smtp_port": smtp.port,
            "smtp_security": "starttls",
            "smtp_ca_file": str(cert),
            "smtp_from": "gpu-portal@example.org",
            "delivery_poll_seconds": 0.5,
        }
        settings = Settings(**values, delivery_enabled=not separate)  # type: ignore[arg-type]
        migrate(settings)
        app = create_app(settings)
        deliver_process: subprocess.Popen[bytes] | None = None
        with TestClient(app):
            factory = portal_of(app).session_factory
            with unit_of_work(factory) as session:
                seed_example(session)
                admin = session.scalars(select(User).where(User.is_admin)).one()
                key_text = settings.secret_key.get_secret_value()
                for team_id, kind, port in ((1, "slack", slack_port), (None, "json", json_port)):
                    notifications.save_webhook(
                        session,
                        actor=admin,
                        team_id=team_id,
                        kind=kind,
                        url=f"http://127.0.0.1:{port}/hook",
                        key=key_text,
                        allow_private=True,
                        development=True,
                    )
                people = [
                    User(email=f"p{n}@example.org", display_name=f"p{n}")
                    for n in range(args.events)
                ]
                session.add_all(people)
                session.flush()
                person_ids = [p.id for p in people]
            if separate:
                env = {**os.environ, **{f"PORTAL_{k.upper()}": str(v) for k, v in values.items()}}
                deliver_process = subprocess.Popen(
                    [sys.executable, "-m", "app.cli", "deliver"],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            # Drain what seeding sent, then start from an empty outbox.
            wait_drained(factory, timeout=120)
            with unit_of_work(factory) as session:
                session.execute(text("DELETE FROM deliveries"))
            client = client_for(app, "lead-nlp@example.org")
            before = [page_latency(client, args.requests) for _ in range(args.rounds)]

            committed: dict[int, float] = {}  # delivery id -> its event's commit time

            def write(batch: list[tuple[int, int]]) -> None:
                """Notify person ``person_id`` of event ``n`` for each pair, in one
                transaction; note the commit time of every delivery it wrote."""
                with unit_of_work(factory) as session:
                    for n, person_id in batch:
                        notifications.notify(
                            session,
                            event="team.member_added",
                            title=f"event {n}",
                            link="/teams/1",
                            user_ids=[person_id],
                            team_id=1,
                        )
                    session.flush()
                    titles = [f"event {n}" for n, _ in batch]
                    ids = session.scalars(
                        select(Delivery.id).where(Delivery.title.in_(titles))
                    ).all()
                at = time.time()
                committed.update({delivery_id: at for delivery_id in ids})

            def produce() -> None:
                events = list(enumerate(person_ids))
                if burst:
                    write(events)
                else:
                    for event in events:
                        write([event])

            started = time.time()
            producer = threading.Thread(target=produce)
            producer.start()
            during = []
            while producer.is_alive() or not drained(factory):
                during.append(page_latency(client, max(10, args.requests // 5)))
            producer.join()
            with factory() as session:
                counts = notifications.delivery_counts(session)
        if deliver_process is not None:
            deliver_process.terminate()
            deliver_process.wait(30)
        stop.set()
        receiver.join(30)
        arrivals = json.loads(Path(out).read_text())
        mail_arrivals: list[tuple[str, float]] = []
        for message_path in (smtp.maildir / "new").iterdir():
            head = message_path.read_text(errors="replace").split("\n\n", 1)[0]
            for line in head.splitlines():
                if line.lower().startswith("message-id:"):
                    delivery_id = line.split("delivery-", 1)[1].split("@", 1)[0]
                    mail_arrivals.append((delivery_id, message_path.stat().st_mtime))
        arrivals["email"] = mail_arrivals

    where = "a separate `gpu-portal deliver` process" if separate else "the portal process"
    how = "all events in one transaction" if burst else "one transaction per event"
    print(f"\n== {how}, delivered by {where} ==")
    mine = {k: [(i, at) for i, at in v if int(i) in committed] for k, v in arrivals.items()}
    total = sum(len(v) for v in mine.values())
    last = max(at for v in mine.values() for _, at in v)
    print(
        f"events: {args.events}, deliveries: {len(committed)} (sent {counts['sent']}, "
        f"failed {counts['failed']}, pending {counts['pending']}); arrived: {total}"
    )
    print(
        f"throughput: {total / (last - started):.0f} deliveries/s over {last - started:.1f} s "
        f"(events committed in {max(committed.values()) - started:.1f} s)"
    )
    for channel, items in sorted(mine.items()):
        lat = [(at - committed[int(i)]) * 1000 for i, at in items]
        dupes = len(items) - len({i for i, _ in items})
        print(
            f"  {channel:6s} {len(items):5d} arrived, duplicates {dupes}, commit->arrival "
            f"p50 {statistics.median(lat):.0f} ms, p95 {pct(lat, 0.95):.0f} ms"
        )
    b, d = statistics.median(before), statistics.median(during)
    print(
        f"team page p50 before: {b:.1f} ms (rounds {', '.join(f'{x:.1f}' for x in before)}); "
        f"while events are written and delivered: {d:.1f} ms ({len(during)} samples), "
        f"ratio {d / b:.2f}"
    )


def drained(factory: object) -> bool:
    with factory() as session:  # type: ignore[operator]
        pending = session.scalar(
            select(func.count()).select_from(Delivery).where(Delivery.status == "pending")
        )
    return not pending


def wait_drained(factory: object, timeout: float) -> None:
    deadline = time.time() + timeout
    while not drained(factory) and time.time() < deadline:
        time.sleep(0.2)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
