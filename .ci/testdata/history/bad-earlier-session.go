package x

// As an earlier session found, the map is cloned per batch.
