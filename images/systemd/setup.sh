# Runs inside the chroot (/bin/sh -e) after the packages are installed and files/ is copied.
systemctl enable hutch-agent.service
# No login prompts: the serial console is the box's log, and nobody logs in on a tty.
systemctl mask getty.target
# Nothing reaches the network unasked: apt's daily update and upgrade would only fail behind the
# box's wall (and cost CPU under TCG); no periodic fstrim or e2scrub either.
systemctl mask apt-daily.timer apt-daily-upgrade.timer fstrim.timer e2scrub_all.timer
# A persistent journal: journalctl shows earlier boots after a stop --shutdown and start.
mkdir -p /var/log/journal
