#!/bin/sh
# Runs in the chroot after the packages are installed: the default user may use docker.
set -e
adduser hutch docker
