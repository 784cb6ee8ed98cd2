"""Personal data: the scrubber, and the number and credentials kept out of logs and rows."""
