from ctxwin.cli import run

run()
