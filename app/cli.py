"""`gpu-portal serve | migrate | seed | deliver | work`."""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import signal
import sys
import threading
import time
from typing import Any

from alembic import command
from alembic.config import Config
from pydantic import ValidationError

from app.core import logs
from app.core.config import PROJECT_ROOT, Settings, describe_error, get_settings
from app.core.db import make_engine, make_session_factory, ping, unit_of_work
from app.core.jobs import Role

log = logging.getLogger("gpu_portal")


def alembic_config(settings: Settings) -> Config:
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.attributes["database_url"] = settings.database_url
    return config


def wait_for_database(settings: Settings, timeout: float = 60.0) -> None:
    engine = make_engine(settings.database_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                ping(engine)
                return
            except Exception as exc:
                reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"gpu-portal: the database is not reachable: {reason}"
                    ) from None
                log.info("waiting for the database: %s", reason)
                time.sleep(1)
    finally:
        engine.dispose()


def migrate(settings: Settings, revision: str = "head") -> None:
    wait_for_database(settings)
    command.upgrade(alembic_config(settings), revision)


def seed(settings: Settings) -> bool:
    from app.teams.seed import seed_example, seed_grant, seed_pool_use, seed_sleep
    from app.usage.demo import seed_budget, seed_history

    engine = make_engine(settings.database_url)
    try:
        factory = make_session_factory(engine)
        with unit_of_work(factory) as session:
            # The demo's org, with two weeks of history for right-sizing to speak of, one
            # team holding GPUs of the L40S pool too (and a temporary grant there), one
            # asleep, and a GPU-hour budget half spent.
            return (
                seed_example(session)
                and seed_pool_use(session)
                and seed_grant(session)
                and seed_sleep(session)
                and seed_history(session) > 0
                and seed_budget(session)
            )
    finally:
        engine.dispose()


def run_roles(settings: Settings, roles: frozenset[Role], *, stop: threading.Event) -> None:
    """Build the portal's parts, run the jobs of ``roles`` until ``stop`` is set (or one of
    their loops dies), then stop them: the worker hands its leases back, the delivery its
    claims."""
    from app.runtime import Portal  # the portal's parts: imported by the commands that run

    portal = Portal(settings, roles=roles)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    portal.start()
    try:
        while not stop.is_set() and portal.alive():
            stop.wait(1)
    except KeyboardInterrupt:
        pass
    finally:
        portal.stop()


def deliver(settings: Settings, *, until_idle: bool) -> int:
    """Send notification deliveries in this process (and write the notices due by the
    clock: kubeconfigs expiring, the weekly digest). ``until_idle``: send what is due now
    and return how many attempts were made."""
    if not until_idle:
        run_roles(settings, frozenset({Role.DELIVER}), stop=threading.Event())
        return 0
    from app.runtime import Portal

    portal = Portal(settings, roles={Role.DELIVER})
    total = 0
    try:
        while made := portal.deliverer.run_once():
            total += made
    finally:
        portal.stop()
    log.info("delivered: %d attempt(s)", total)
    return total


def work(settings: Settings) -> None:
    """Run the provisioning worker and the kubeconfig sweeper in this process, without
    serving pages: for a large org, web replicas then run with PORTAL_WORKER_ENABLED=false
    and carry none of the reconcile load. Stops on SIGTERM or Ctrl-C, handing
    its leases back."""
    run_roles(settings, frozenset({Role.WORK}), stop=threading.Event())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-portal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve_p = sub.add_parser("serve", help="migrate the database, then serve the portal")
    serve_p.add_argument("--host", default="127.0.0.1")
    serve_p.add_argument("--port", type=int, default=8000)
    serve_p.add_argument("--seed", action="store_true", help="seed the example org if empty")
    serve_p.add_argument("--workers", type=int, default=1)
    migrate_p = sub.add_parser("migrate", help="run Alembic migrations")
    migrate_p.add_argument("revision", nargs="?", default="head")
    sub.add_parser("seed", help="seed the design source's example org if the database is empty")
    deliver_p = sub.add_parser(
        "deliver", help="send notification deliveries (each portal process does this too)"
    )
    deliver_p.add_argument(
        "--until-idle", action="store_true", help="stop once nothing is due instead of waiting"
    )
    sub.add_parser(
        "work",
        help="run the provisioning worker and kubeconfig sweeper without serving pages "
        "(with PORTAL_WORKER_ENABLED=false on the web replicas)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = get_settings()
    except ValidationError as exc:
        sys.exit(
            "\n".join(f"gpu-portal: refusing to start: {line}" for line in describe_error(exc))
        )
    log_config = logs.dict_config(settings.log_format)
    logging.config.dictConfig(log_config)
    logs.install()
    logs.register_secrets(settings.secret_values())
    if args.command == "migrate":
        migrate(settings, args.revision)
    elif args.command == "seed":
        migrate(settings)
        print("seeded the example org" if seed(settings) else "the database already has an org")
    elif args.command == "deliver":
        deliver(settings, until_idle=args.until_idle)
    elif args.command == "work":
        migrate(settings)
        work(settings)
    elif args.command == "serve":
        serve(settings, args, log_config)


def serve(settings: Settings, args: argparse.Namespace, log_config: dict[str, Any]) -> None:
    """Migrate, seed if asked, then serve until stopped."""
    import uvicorn

    migrate(settings)
    # The metrics port listens where the portal is told to (the workers read it).
    os.environ.setdefault("PORTAL_METRICS_HOST", args.host)
    if args.seed and seed(settings):
        log.info("seeded the example org ml-org with teams nlp, vision, recommender")
    uvicorn.run(
        "app.main:serve_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        proxy_headers=True,
        log_config=log_config,
        # SIGTERM: stop accepting, finish open requests (at most this long), then the
        # app's shutdown hands the worker's leases back (see app.main's lifespan).
        timeout_graceful_shutdown=20,
    )


if __name__ == "__main__":
    main()
