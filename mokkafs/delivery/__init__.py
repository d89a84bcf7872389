"""Consumers of the tree that deliver it elsewhere: CDI specs for containers, re-attaching them
after a restart, the LD_PRELOAD shim's environment, and plain files (render)."""
