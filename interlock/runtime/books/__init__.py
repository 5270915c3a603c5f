"""The books the request writes into: the request's record, the health book (circuits), what answers
teach (learned, and its copy kept across restarts), the access journal and the audit log."""
