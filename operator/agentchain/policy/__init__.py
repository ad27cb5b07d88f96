"""Pure decisions: chains, names, the chain-context block, delegation.

Nothing here performs I/O or imports kopf, kubernetes, redis or aiohttp: every
function takes values and returns values, so handlers apply decisions and tests
can check them exhaustively.  Import the modules, not their names.
"""
