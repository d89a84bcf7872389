"""Hardware profiles: YAML text -> validated models -> an immutable State."""
