"""Thin adapters that use lock libraries the way their documentation tells users to, with no fix of ours."""
