"""Redis under Sentinel: a primary, a replica and three Sentinels that fail over by themselves."""
