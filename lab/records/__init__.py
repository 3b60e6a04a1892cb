"""A run's records: its folder (meta.json, trials.jsonl), what the machine's host took while it ran, and the
export of its histories for Jepsen's tools."""
