package metadata

// AppendMessageVersion encodes in an earlier version, for the external
// tests.
var AppendMessageVersion = appendMessage
