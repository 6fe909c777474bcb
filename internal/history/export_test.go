package history

// Decode is decode, for the tests of package history_test.
var Decode = decode
