package sandbox

// CopyFile copies a file to a new path (mode 0755), as the self-test places its probe.
var CopyFile = placeProbe
