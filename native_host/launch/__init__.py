"""Starting Pedelec Desktop in the background when its Core is down (spec 4, 7.14).

`config` reads and checks `app-launch.json`, `spawn` starts the app detached, and
`launcher` makes sure that happens once at a time and waits for the Core to answer.
"""
