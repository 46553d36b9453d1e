"""The workflow engine: phases, agents, parallel and pipeline fan-out, resumable runs."""
