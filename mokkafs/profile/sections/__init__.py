"""The sections of a profile, one module each; ``mokkafs.profile.schema`` holds the whole
document and names them all."""
