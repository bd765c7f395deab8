"""One module per subcommand; cli.py maps names to "module:function" and imports a command only when asked."""
