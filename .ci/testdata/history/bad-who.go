package x

func TestLabels(t *testing.T) { t.Log("labels as sorted pairs (helper-12)") }
