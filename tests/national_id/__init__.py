"""National identity numbers: the parser and what the flow stores."""
