package postgres

// Classify is classify, for the tests.
var Classify = classify
