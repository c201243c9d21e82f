#!/bin/sh
# Runs in the chroot after the packages and npm packages are installed: playwright-core where
# Debian's node finds modules by name (require("playwright-core") from any directory).
set -e
ln -sfn /usr/local/lib/node_modules/playwright-core /usr/share/nodejs/playwright-core
