"""Measuring a ready engine. `loop` measures every cell of a plan; `contract` is what passes between it and the
cell kinds (`kinds/`, each kind a module, with its machinery beside it where it has some); `transport/` sends the
requests, `observers/` watch the host, GPUs and engine beside each cell, `figures/` summarise the requests, and
`cells`, `validity` and `log` make and keep the rows."""
