from ctxwin._entry import run

run()
