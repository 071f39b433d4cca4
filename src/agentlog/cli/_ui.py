"""``agentlog ui``: serve the web debugger on this machine and open it in the browser."""

from __future__ import annotations

import errno
import socket
import threading
import time
import webbrowser
from typing import Annotated
from urllib.parse import urlencode

import typer

from agentlog.archive._store import DEFAULT_ARCHIVE_URL
from agentlog.cli._app import command, run_async
from agentlog.cli._options import AppOpt, ArchiveOpt, JsonOpt, LogOpt, key_store, size_bytes
from agentlog.cli._render import print_json_line, print_line
from agentlog.cli._workflows import load_workflows
from agentlog.errors import ConfigError
from agentlog.eventlog._urls import DEFAULT_LOG_URL, open_log

__all__: list[str] = []


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound now (uvicorn listens on it), so that the URL
    printed is one that answers, and ``--port 0`` prints the port it got.

    Raises:
        ConfigError: the address cannot be bound; the message names it and,
            for a port in use, says to pick a free one with ``--port 0``.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"cannot listen on {where}: the port is already in use (another agentlog "
                "ui?); stop that server, or pick another port: --port 0 picks a free one"
            ) from None
        raise ConfigError(
            f"cannot listen on {where}: {exc.strerror or exc}; check --host (an address of "
            "this machine), or pick another port: --port 0 picks a free one"
        ) from None
    return sock


def _open_when_up(server: object, url: str) -> None:
    """Open the browser once uvicorn listens (bounded: it gives up after 30 s)."""
    deadline = time.monotonic() + 30
    while not getattr(server, "started", False) and time.monotonic() < deadline:
        time.sleep(0.05)
    if getattr(server, "started", False):
        webbrowser.open(url)


async def _check_log(log_url: str) -> None:
    """Fail now, with the usual one-line error, on a log that does not open."""
    hot = await open_log(log_url, create=False, keys=key_store())
    await hot.close()


@command()
def ui(
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; the default serves this machine only."),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port to listen on (0: a free one).", min=0, max=65535)
    ] = 8765,
    allow_actions: Annotated[
        bool,
        typer.Option(
            "--allow-actions",
            help="Serve resume, cancel and fork (behind a CSRF token); read-only otherwise.",
        ),
    ] = False,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL; do not open a browser.")
    ] = False,
    public_host: Annotated[
        list[str] | None,
        typer.Option(
            "--public-host",
            metavar="HOST",
            help="With a --host other than this machine: a host name clients use to reach "
            "it (repeatable); no other Host name is answered (DNS rebinding).",
        ),
    ] = None,
    sql_timeout: Annotated[
        float,
        typer.Option(help="Seconds one query of the SQL page may run, then stopped.", min=0.001),
    ] = 30.0,
    sql_memory_limit: Annotated[
        str,
        typer.Option(
            help="DuckDB's memory limit for one query of the SQL page (nothing spills to disk)."
        ),
    ] = "1GB",
    sql_max_result: Annotated[
        str,
        typer.Option(help="The most bytes the rows one query of the SQL page reads may hold."),
    ] = "64MB",
    sql_max_running: Annotated[
        int,
        typer.Option(
            help="The most SQL queries running at once; one more is refused (429).", min=1
        ),
    ] = 2,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTLOG_UI_TOKEN",
            help="The access token every request must carry (the printed URL holds it). "
            "Default: a random one when --host is not this machine; none on loopback.",
        ),
    ] = None,
    trace_url: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTLOG_TRACE_URL",
            help="A trace viewer's URL with {trace_id} in it (Jaeger: "
            "http://localhost:16686/trace/{trace_id}): a traced run's page links to its "
            "OpenTelemetry trace.",
        ),
    ] = None,
    apps: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A web timeline of any run (live, hot or archived), with SQL over the archive.

    Ctrl-C stops the server.
    """
    import uvicorn

    from agentlog.ui import create_app
    from agentlog.ui._access import TOKEN_PARAM, check_token, new_token
    from agentlog.ui._api_sql import SqlLimits
    from agentlog.ui._app import is_loopback, served_hosts

    workflows = load_workflows(apps) if allow_actions else []
    run_async(lambda: _check_log(log))
    size_bytes("--sql-memory-limit", sql_memory_limit)
    limits = SqlLimits(
        timeout=sql_timeout,
        memory_limit=sql_memory_limit,
        max_result_bytes=size_bytes("--sql-max-result", sql_max_result),
        max_running=sql_max_running,
    )
    loopback = is_loopback(host)
    hosts = served_hosts(host, public_host or ())
    # A network peer must not reach the runs: off this machine, every request needs it.
    if token is not None:
        check_token(token)
    elif not loopback:
        token = new_token()
    app = create_app(
        log,
        archive,
        allow_actions=allow_actions,
        keys=key_store(),
        workflows=workflows,
        allowed_hosts=hosts,
        sql_limits=limits,
        access_token=token,
        trace_url=trace_url,
    )
    with _listen(host, port) as sock:
        chosen: int = sock.getsockname()[1]
        url = _url(host, public_host or [], hosts, chosen, token, TOKEN_PARAM)
        warning = (
            f"warning: listening on {host} (host names "
            f"{', '.join(h for h in hosts if not is_loopback(h))}): every request needs the "
            "token in the URL above; anyone who has it can read every run"
            + (" and act on them" if allow_actions else "")
            + ". The connection is plain HTTP, so use a network you trust or a TLS proxy"
        )
        if as_json:  # one line a script can read the URL from
            print_json_line({"url": url, "actions": allow_actions, "loopback": loopback})
            if not loopback:
                typer.echo(warning, err=True)
        else:
            print_line(f"agentlog ui: {url}" + (" (actions allowed)" if allow_actions else ""))
            if not loopback:
                print_line(warning)
        config = uvicorn.Config(
            app,
            host=host,
            port=chosen,
            log_level="warning",
            lifespan="on",
            # Open live feeds (server-sent events) must not hold Ctrl-C up.
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        if not no_browser:
            threading.Thread(target=_open_when_up, args=(server, url), daemon=True).start()
        server.run(sockets=[sock])
    if not server.started:
        raise ConfigError(
            f"the UI did not start on {host}:{chosen} (see the message above); check --log"
        )


def _url(
    host: str, public_host: list[str], hosts: list[str], port: int, token: str | None, param: str
) -> str:
    """The URL as a client names the server (0.0.0.0 is no address to visit)."""
    named = host if host in hosts else (public_host or [host])[0]
    shown = f"[{named}]" if ":" in named else named
    url = f"http://{shown}:{port}/"
    return url + "?" + urlencode({param: token}) if token is not None else url
