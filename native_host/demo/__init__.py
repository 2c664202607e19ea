"""`pedelec-native-host demo`: one whole Pedelec session through the host, as Chrome runs it.

A newcomer's first command (issue 7). It starts the dev Core in a throwaway Pedelec home,
starts the host the way Chrome does (a subprocess with the extension origin as argument,
framed stdio), walks a session from `ping` to `ended`, checks every answer and prints a
transcript: a readable table, or one JSON object per line with `--json`.

- `session`: the scripted session; talks to the host, checks each answer, emits records.
- `transcript`: turns those records into aligned rows (the JSON form is the record itself).
- `cli`: the command line, and writing each record as it happens.
"""
