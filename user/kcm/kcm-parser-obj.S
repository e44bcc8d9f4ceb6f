/* The compiled KCM length parser (kcm-parser.bpf.c), embedded as data:
 * kcm-bpf.c hands these bytes to libbpf, so no file is looked up at run
 * time. KCM_PARSER_OBJ is the object's path, given by user/kcm/kcm.mk. */
	.section .rodata
	.balign 8
	.globl kcm_parser_obj
	.type kcm_parser_obj, @object
kcm_parser_obj:
	.incbin KCM_PARSER_OBJ
	.globl kcm_parser_obj_end
kcm_parser_obj_end:
	.size kcm_parser_obj, kcm_parser_obj_end - kcm_parser_obj
	.section .note.GNU-stack, "", @progbits
