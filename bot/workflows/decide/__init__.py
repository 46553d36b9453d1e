"""`decide`: the follow-up that answers a BLOCKED run by resuming its workflow with the decision.
Imports runs, publish and the other workflows (their resume handlers)."""
