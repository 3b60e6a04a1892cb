"""The holder process and its protocol: a lock holder in an OS process of its own (forked from one that imported
once), and the JSON-lines protocol a lock client in any language speaks to the lab."""
