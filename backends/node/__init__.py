"""Lock clients in Node.js, each a holder program (`<name>/holder.js`, with its package.json and package-lock.json)
and a declaration beside it (`node_<name>.py`). `npm ci --prefix backends/node/<name>` installs a program's packages."""
