"""`lab scan`: the write-up's two bugs found in Python source, each tied to the lab's measured cell.

A session advisory lock left idle in the transaction its connection opened (idle_in_transaction_session_timeout ends
it mid-run), and a release that swallows its own failure. The code is read as an AST and interpreted on values it
can know, following each lock to the connection it runs on and to where that connection was made and configured;
nothing scanned is ever run. scanner.scan() is the analysis, evidence.attach() adds the committed reference's cells,
render prints text, JSON or SARIF. docs/scan.md says how it decides and what it found in the lock libraries.
"""
