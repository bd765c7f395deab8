"""`tokenmath serve`: the local web page and its JSON API (no physics here: see tokenmath/web)."""
import click


@click.command()
@click.option("--port", "-p", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="TCP port (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. The default serves this machine only; 0.0.0.0 exposes it to the network.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@click.option("--log", "log_requests", is_flag=True, help="Print an access log line per request.")
def serve(port, host, open_browser, log_requests):
    """Local web page (offline) + JSON API: roofline, batch hyperbola, Pareto, KV/context, prices, deduce, training."""
    from tokenmath.faces.web.server import make_server
    try:
        srv = make_server(host, port, log_requests)
    except OSError as e:
        raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror or e} "
                                   "(try another --port, or --port 0 for any free one)") from None
    click.echo(f"tokenmath serving on {srv.url}  (API: {srv.url}api; Ctrl-C to stop)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo("warning: bound beyond loopback: anyone who can reach this address can use the page", err=True)
    if open_browser:
        import webbrowser
        webbrowser.open(srv.url)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        srv.server_close()
