from ctxwin.cli.main import run

run()
