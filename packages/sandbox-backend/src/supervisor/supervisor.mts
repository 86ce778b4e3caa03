// Entry of the in-jail supervisor, bound at /opt/paperclip/supervisor.mjs; its modules are bound
// next to it at /opt/paperclip/in-jail/ (see in-jail/main.mts).
import "./in-jail/main.mjs";
